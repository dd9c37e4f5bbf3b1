
Bgrad_outputJK6