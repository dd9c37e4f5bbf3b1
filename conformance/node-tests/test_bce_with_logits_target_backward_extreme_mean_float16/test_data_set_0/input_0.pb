
Bgrad_outputJ¥»