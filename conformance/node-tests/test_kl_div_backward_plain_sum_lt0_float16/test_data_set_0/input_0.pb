
Bgrad_outputJã8