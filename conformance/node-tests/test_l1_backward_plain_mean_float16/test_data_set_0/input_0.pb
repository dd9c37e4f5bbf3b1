
Bgrad_outputJк