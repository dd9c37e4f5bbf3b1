
Bgrad_outputJD¸