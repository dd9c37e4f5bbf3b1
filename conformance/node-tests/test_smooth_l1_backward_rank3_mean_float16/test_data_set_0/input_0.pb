
Bgrad_outputJº0