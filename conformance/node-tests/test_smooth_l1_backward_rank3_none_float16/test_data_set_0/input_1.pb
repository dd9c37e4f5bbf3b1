
BinputJ!µY<5