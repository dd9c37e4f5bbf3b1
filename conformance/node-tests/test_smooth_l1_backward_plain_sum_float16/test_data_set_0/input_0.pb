
Bgrad_outputJ ?