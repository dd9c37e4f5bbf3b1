
BinputJ·º-ºÖ±