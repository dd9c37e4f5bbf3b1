
Bgrad_outputJ’6¡¾î42¸