
Bgrad_outputJ۶