
Bgrad_outputJÁO8«>›¹