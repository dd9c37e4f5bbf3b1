
Bgrad_outputJlº