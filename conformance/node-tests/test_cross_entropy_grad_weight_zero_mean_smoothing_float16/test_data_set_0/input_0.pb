
Bgrad_outputJõš