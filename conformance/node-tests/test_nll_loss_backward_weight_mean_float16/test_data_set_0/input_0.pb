
Bgrad_outputJÇ<