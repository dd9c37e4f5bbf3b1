
Bgrad_outputJ>