
Bgrad_outputJ„¹