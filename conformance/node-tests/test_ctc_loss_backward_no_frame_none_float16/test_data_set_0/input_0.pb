
Bgrad_outputJ;¶­