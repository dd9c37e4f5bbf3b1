
Bgrad_outputJÔ¼40d³2¸