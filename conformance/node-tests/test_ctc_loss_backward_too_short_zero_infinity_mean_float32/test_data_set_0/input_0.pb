Bgrad_outputJÀ
?