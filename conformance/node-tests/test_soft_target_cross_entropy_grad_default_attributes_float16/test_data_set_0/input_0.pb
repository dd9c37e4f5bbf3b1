
Bgrad_outputJE8