
BinputJÍ4