
BoutputJ=