
Bgrad_outputJV½