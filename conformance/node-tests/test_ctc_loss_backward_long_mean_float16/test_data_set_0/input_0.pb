
Bgrad_outputJ#½