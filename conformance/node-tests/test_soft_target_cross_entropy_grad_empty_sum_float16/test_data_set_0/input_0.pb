
Bgrad_outputJˆ¶