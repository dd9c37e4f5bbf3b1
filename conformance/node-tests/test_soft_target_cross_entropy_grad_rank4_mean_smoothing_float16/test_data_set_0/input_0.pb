
Bgrad_outputJd¶