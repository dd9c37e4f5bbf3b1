
Bgrad_outputJN5