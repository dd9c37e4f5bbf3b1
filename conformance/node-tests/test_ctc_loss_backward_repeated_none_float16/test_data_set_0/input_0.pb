
Bgrad_outputJÜ7/69˜5