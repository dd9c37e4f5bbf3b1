
BoutputJ,7