
Bgrad_outputJ¦¾eµ