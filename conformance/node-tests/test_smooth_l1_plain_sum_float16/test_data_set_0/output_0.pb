
BoutputJ[L