
BinputJ—3A½O¶»/<(>Ñ¸