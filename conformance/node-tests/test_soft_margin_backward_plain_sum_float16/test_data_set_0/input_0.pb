
Bgrad_outputJW9