
Bgrad_outputJº