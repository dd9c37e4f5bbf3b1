
Bgrad_outputJ	: