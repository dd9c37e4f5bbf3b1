
Bgrad_outputJªµ