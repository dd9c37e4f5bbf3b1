
Bgrad_outputJv#