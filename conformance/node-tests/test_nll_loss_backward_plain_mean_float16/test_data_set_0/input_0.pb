
Bgrad_outputJÂ4