
Bgrad_outputJ£¬