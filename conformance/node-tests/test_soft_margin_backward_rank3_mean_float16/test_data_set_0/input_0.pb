
Bgrad_outputJхо