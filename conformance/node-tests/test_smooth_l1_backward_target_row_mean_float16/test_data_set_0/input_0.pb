
Bgrad_outputJÆ=