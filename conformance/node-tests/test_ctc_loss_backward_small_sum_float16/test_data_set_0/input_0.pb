
Bgrad_outputJëº