
Bgrad_outputJ ?