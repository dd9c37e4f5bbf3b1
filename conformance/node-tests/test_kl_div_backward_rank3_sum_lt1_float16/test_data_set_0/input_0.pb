
Bgrad_outputJá·