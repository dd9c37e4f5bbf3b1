
Bgrad_outputJ°