
Bgrad_outputJ4