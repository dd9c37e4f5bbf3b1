Bgrad_outputJ
î@