
Bgrad_outputJz>