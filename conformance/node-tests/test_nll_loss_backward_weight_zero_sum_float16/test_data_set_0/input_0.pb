
Bgrad_outputJ@<