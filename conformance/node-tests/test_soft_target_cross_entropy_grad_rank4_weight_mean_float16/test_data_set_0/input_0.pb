
Bgrad_outputJs¼