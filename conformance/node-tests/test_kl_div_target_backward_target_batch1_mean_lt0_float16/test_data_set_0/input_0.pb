
Bgrad_outputJؿ