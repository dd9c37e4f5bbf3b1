
Bgrad_outputJ®2