
Bgrad_outputJi¿