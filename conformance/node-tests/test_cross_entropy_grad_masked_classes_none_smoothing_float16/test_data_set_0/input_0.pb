
Bgrad_outputJ"8o4.À‡3