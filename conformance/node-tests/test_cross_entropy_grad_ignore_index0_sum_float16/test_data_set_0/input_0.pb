
Bgrad_outputJd¾