
Bgrad_outputJLÀ