
Bgrad_outputJI1