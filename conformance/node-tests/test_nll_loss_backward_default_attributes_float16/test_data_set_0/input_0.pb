
Bgrad_outputJ¿