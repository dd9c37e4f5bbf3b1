
Bgrad_outputJเน