
Bgrad_outputJp9