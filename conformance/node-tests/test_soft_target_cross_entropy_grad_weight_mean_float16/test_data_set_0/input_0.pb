
Bgrad_outputJ›*