
Bgrad_outputJ·´