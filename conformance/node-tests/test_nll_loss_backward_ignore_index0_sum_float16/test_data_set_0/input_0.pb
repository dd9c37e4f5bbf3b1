
Bgrad_outputJV: