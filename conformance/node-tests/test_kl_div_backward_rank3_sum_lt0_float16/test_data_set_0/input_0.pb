
Bgrad_outputJž8