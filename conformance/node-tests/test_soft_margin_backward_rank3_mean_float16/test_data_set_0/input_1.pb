
BinputJˆ«Â¾H¼