
Bgrad_outputJR³