Bgrad_outputJ‡>Û<
À