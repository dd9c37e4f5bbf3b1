
Bgrad_outputJþ´