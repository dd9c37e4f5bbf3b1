
BinputJz©¾¾ù4