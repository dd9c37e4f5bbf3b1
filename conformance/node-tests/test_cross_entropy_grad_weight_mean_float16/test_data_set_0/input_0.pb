
Bgrad_outputJYº