
Bgrad_outputJٽ