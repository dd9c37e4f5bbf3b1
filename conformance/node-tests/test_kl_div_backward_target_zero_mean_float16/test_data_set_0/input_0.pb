
Bgrad_outputJ3¹