
BoutputJ'0