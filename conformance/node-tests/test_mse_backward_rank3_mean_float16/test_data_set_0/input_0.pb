
Bgrad_outputJÔ<