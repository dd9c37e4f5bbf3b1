
Bgrad_outputJâ.