
Bgrad_outputJ·'