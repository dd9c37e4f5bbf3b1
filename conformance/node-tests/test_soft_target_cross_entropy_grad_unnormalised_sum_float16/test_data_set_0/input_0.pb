
Bgrad_outputJm<