
Bgrad_outputJkº