
Bgrad_outputJ¶