
Bgrad_outputJù¼§»Z6f;ïº<?~1Ö¬„2f¶