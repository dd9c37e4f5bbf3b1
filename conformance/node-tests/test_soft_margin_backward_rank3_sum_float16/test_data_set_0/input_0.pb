
Bgrad_outputJ¤´