
Bgrad_outputJ =