
Bgrad_outputJû9