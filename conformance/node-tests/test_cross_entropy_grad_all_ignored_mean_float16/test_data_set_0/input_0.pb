
Bgrad_outputJ®<