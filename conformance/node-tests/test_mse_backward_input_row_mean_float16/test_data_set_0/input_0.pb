
Bgrad_outputJa»