
Bgrad_outputJ.7