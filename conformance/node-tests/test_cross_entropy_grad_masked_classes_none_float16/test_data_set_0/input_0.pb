
Bgrad_outputJWÁJ¬Ç7¾