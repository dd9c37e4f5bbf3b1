
Bgrad_outputJ46