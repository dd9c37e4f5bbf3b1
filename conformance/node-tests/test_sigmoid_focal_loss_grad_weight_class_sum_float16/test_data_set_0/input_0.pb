
Bgrad_outputJ¾½