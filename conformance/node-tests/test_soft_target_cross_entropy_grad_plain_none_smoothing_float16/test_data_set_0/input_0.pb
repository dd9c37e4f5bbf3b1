
Bgrad_outputJÎ5Ö¼¶¸/­