
Bgrad_outputJµ<