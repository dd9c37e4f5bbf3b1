
BoutputJ,5