
Bgrad_outputJ>