
Bgrad_outputJø*