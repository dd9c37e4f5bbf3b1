
Bgrad_outputJz³