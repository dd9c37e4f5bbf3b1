
Bgrad_outputJI¾