
Bgrad_outputJú>K1ø?Œ¹