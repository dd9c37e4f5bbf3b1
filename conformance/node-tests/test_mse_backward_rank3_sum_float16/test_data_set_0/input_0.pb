
Bgrad_outputJ	»