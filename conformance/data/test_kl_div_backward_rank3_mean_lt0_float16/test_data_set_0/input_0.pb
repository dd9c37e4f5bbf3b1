
Bgrad_outputJ´±