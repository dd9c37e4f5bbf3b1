
Bgrad_outputJA