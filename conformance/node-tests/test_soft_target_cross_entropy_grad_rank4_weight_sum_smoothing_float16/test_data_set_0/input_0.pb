
Bgrad_outputJÿ°