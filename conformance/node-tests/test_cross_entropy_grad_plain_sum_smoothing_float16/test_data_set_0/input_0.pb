
Bgrad_outputJÚ6