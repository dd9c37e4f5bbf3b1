
Bgrad_outputJ"@