
Bgrad_outputJS¼