
BinputJš¹