
Bgrad_outputJ5¼