
Bgrad_outputJÚ=