
Bgrad_outputJË#