
Bgrad_outputJ®@Ã¿