
Bgrad_outputJš¶