
Bgrad_outputJš4ˆ¶R³E8Î5Ö¼¶¸/­