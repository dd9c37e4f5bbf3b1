
Bgrad_outputJU«