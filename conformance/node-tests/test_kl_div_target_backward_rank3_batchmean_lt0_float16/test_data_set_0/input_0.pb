
Bgrad_outputJÅ,