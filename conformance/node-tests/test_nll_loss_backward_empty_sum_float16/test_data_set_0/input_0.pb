
Bgrad_outputJ[+