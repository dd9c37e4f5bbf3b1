
Bgrad_outputJÚ4