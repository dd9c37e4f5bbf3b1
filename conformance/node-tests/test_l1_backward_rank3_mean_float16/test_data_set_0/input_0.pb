
Bgrad_outputJö·