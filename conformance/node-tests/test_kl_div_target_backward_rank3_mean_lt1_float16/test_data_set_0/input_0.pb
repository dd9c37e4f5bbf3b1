
Bgrad_outputJÑ<