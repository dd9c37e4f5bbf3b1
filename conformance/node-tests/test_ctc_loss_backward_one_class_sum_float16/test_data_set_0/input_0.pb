
Bgrad_outputJ³6