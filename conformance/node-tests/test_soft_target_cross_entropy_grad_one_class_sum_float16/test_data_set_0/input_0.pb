
Bgrad_outputJš4