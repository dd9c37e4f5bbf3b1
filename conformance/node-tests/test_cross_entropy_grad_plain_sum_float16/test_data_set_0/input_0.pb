
Bgrad_outputJÉ0