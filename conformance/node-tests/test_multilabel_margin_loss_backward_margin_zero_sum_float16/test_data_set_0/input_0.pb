
Bgrad_outputJe¾