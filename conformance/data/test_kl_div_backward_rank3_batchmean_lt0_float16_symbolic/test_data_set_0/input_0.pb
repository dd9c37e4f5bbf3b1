
Bgrad_outputJ­<