
Bgrad_outputJô¾