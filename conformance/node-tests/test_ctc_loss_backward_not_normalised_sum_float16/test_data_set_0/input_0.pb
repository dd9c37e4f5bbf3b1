
Bgrad_outputJûµ