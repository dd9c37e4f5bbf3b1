
Bgrad_outputJq8