
BinputJ©:À[<