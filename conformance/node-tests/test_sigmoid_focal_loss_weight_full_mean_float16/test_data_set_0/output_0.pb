
BoutputJ,0