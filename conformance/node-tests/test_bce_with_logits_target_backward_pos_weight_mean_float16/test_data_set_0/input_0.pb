
Bgrad_outputJ
<