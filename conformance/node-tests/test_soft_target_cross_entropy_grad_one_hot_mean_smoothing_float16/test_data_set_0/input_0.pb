
Bgrad_outputJ˜¿