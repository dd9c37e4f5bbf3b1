
Bgrad_outputJd3