
Bgrad_outputJ,: