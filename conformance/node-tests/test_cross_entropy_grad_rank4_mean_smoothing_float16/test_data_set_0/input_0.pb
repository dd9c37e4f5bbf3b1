
Bgrad_outputJå¹