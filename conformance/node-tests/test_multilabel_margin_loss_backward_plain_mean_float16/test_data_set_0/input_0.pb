
Bgrad_outputJþ¹