
Bgrad_outputJ&¿¼$¿<²