
Bgrad_outputJç¾