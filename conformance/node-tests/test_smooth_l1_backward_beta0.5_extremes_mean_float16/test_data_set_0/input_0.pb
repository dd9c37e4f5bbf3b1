
Bgrad_outputJ÷'