
Bgrad_outputJ(­