
Bgrad_outputJ¸