
Bgrad_outputJȹ