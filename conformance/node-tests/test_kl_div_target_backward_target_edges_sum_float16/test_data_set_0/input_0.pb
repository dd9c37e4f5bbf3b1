
Bgrad_outputJ_­