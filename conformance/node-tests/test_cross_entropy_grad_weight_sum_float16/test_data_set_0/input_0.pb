
Bgrad_outputJEº