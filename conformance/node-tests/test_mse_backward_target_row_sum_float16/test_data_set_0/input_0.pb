
Bgrad_outputJ‰: