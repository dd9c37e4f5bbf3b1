
Bgrad_outputJı2