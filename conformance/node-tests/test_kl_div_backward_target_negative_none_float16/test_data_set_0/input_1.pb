
BinputJ¼Nº[«