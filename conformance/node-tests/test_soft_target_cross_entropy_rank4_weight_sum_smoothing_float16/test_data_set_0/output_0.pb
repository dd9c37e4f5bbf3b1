
BoutputJ[P