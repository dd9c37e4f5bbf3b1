
Bgrad_outputJç;