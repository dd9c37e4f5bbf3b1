
Bgrad_outputJªº