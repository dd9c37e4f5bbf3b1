
Bgrad_outputJC: