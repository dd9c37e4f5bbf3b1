
Bgrad_outputJbÀ