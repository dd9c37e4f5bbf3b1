
BoutputJ:<