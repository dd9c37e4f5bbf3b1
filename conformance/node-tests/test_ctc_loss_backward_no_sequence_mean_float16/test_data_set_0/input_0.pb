
Bgrad_outputJ̺