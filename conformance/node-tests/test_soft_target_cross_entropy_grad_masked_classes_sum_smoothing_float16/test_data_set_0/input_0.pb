
Bgrad_outputJB¶