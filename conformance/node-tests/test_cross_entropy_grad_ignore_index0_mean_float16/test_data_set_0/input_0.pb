
Bgrad_outputJl!