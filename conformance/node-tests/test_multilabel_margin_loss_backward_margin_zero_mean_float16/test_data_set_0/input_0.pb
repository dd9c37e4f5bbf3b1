
Bgrad_outputJß0