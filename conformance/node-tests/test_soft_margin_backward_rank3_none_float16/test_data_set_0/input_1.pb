
BinputJÞ­B¾,¬