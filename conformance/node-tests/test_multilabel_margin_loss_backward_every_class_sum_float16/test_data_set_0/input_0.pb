
Bgrad_outputJÍ7