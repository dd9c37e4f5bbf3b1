
Bgrad_outputJS¹