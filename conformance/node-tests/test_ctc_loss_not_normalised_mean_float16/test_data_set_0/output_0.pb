
BoutputJ[Ä