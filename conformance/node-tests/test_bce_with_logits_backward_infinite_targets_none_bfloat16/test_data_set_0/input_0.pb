Bgrad_outputJ
Þ¿«¿®¿´¾À