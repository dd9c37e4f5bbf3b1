
Bgrad_outputJ.¸