
Bgrad_outputJK9