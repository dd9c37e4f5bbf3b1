
Bgrad_outputJ†§