
Bgrad_outputJ—@