
Bgrad_outputJ.¼