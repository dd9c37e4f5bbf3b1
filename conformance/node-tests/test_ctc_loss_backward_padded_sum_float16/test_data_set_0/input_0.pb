
Bgrad_outputJ|6