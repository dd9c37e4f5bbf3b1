
Bgrad_outputJÄ9