
Bgrad_outputJ68