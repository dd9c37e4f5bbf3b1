
BinputJK¼¹ç¹