
Bgrad_outputJ‘¾