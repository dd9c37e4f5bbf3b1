
Bgrad_outputJš9