
Bgrad_outputJ>