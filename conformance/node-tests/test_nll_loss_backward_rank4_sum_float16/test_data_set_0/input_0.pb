
Bgrad_outputJ.