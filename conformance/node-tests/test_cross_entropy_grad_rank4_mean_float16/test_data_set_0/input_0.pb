
Bgrad_outputJ¶»