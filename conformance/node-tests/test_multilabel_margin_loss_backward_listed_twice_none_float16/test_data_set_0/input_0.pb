
Bgrad_outputJU;ó´