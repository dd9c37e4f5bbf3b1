
Bgrad_outputJT8