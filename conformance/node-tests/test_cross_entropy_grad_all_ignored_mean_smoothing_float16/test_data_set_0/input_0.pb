
Bgrad_outputJ–¸