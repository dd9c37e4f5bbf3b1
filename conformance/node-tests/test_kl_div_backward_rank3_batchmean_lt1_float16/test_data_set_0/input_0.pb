
Bgrad_outputJû-