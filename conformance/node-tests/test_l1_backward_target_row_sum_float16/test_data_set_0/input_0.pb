
Bgrad_outputJÓ5