
Bgrad_outputJ	¤