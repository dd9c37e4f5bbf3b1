
Bgrad_outputJ<­