
Bgrad_outputJ>