
Bgrad_outputJÎ<