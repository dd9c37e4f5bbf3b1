
Bgrad_outputJQ8