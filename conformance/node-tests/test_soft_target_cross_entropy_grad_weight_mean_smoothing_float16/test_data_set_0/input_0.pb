
Bgrad_outputJü¾