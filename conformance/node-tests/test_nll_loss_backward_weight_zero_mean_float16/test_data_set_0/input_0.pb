
Bgrad_outputJø5