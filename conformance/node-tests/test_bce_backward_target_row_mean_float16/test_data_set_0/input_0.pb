
Bgrad_outputJ„<