
Bgrad_outputJ
ô¾Y½r½ µ À