
Bgrad_outputJãº