
Bgrad_outputJ
@