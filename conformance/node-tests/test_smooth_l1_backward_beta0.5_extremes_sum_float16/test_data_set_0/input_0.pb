
Bgrad_outputJ€¸