
Bgrad_outputJW»