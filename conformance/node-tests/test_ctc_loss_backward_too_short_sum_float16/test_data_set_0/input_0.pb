
Bgrad_outputJ&3