
Bgrad_outputJ˹