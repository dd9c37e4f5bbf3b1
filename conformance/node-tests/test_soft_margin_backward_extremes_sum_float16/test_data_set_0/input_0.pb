
Bgrad_outputJ“>