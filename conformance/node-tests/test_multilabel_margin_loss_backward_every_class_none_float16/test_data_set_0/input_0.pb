
Bgrad_outputJé2|À