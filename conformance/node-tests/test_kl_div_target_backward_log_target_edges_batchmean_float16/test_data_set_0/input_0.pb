
Bgrad_outputJ÷/