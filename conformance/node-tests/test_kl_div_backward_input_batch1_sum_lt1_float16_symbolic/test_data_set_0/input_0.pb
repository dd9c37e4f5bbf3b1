
Bgrad_outputJ1