
Bgrad_outputJK¼¹ç¹: