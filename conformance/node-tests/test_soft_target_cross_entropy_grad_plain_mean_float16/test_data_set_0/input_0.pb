
Bgrad_outputJÃ1