
Bgrad_outputJY·