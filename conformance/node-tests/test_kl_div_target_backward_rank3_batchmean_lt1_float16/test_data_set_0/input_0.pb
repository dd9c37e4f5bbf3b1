
Bgrad_outputJּ