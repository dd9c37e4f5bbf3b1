
Bgrad_outputJä7