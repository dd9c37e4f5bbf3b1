
Bgrad_outputJϵ