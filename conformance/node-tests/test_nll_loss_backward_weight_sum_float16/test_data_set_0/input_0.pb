
Bgrad_outputJô»