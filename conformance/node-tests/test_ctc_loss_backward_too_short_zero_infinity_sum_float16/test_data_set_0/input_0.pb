
Bgrad_outputJO<