
Bgrad_outputJ<0