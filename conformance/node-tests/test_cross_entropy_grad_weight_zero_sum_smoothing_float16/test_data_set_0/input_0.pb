
Bgrad_outputJÁ