
Bgrad_outputJ£