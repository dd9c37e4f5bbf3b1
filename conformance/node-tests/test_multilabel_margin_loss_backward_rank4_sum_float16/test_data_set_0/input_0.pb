
Bgrad_outputJ: