
Bgrad_outputJ#¸