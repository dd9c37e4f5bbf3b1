
Bgrad_outputJÀº