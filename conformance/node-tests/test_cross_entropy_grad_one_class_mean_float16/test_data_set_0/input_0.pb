
Bgrad_outputJշ