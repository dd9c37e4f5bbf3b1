
Bgrad_outputJª1