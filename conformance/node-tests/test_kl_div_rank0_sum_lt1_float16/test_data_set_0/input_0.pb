
BinputJͼ