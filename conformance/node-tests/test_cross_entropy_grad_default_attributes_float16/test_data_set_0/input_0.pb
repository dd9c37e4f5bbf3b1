
Bgrad_outputJå¯