
Bgrad_outputJŽ<