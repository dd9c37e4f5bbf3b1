
Bgrad_outputJ00