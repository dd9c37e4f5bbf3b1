
Bgrad_outputJ¦8