
Bgrad_outputJâµ