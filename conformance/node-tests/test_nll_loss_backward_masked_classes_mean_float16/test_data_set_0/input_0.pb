
Bgrad_outputJP¹