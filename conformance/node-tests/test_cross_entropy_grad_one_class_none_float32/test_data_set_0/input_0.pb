Bgrad_outputJt‡>ðIÛ<	
À