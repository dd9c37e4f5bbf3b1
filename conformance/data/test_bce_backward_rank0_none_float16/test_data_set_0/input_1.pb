
BinputJf6