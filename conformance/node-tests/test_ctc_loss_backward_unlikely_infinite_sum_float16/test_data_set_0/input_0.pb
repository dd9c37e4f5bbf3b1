
Bgrad_outputJİ+