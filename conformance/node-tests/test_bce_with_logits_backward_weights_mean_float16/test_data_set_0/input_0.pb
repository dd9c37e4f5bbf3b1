
Bgrad_outputJͻ