
Bgrad_outputJf¹