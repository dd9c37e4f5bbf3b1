
Bgrad_outputJP: