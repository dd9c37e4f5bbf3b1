
Bgrad_outputJÙ8f<Ê5Á¼