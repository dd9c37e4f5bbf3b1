
Bgrad_outputJ’?