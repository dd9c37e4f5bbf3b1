
Bgrad_outputJWº