
Bgrad_outputJö¾