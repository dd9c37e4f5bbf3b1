
Bgrad_outputJQº