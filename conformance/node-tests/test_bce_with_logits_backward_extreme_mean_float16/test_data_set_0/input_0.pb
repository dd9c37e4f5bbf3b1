
Bgrad_outputJ¿