
BinputJì3ê<Š@