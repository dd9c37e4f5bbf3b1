
BweightJ
›5=b>,=¤;