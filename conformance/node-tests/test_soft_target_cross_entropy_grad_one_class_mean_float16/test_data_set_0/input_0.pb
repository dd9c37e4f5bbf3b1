
Bgrad_outputJ{»