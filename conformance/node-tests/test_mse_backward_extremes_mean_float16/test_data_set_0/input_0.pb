
Bgrad_outputJ‡­