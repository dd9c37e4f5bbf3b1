
Bgrad_outputJ
?