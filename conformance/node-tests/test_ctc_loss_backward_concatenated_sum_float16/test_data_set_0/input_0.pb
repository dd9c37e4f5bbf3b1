
Bgrad_outputJA¼