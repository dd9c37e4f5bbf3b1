
Bgrad_outputJf´