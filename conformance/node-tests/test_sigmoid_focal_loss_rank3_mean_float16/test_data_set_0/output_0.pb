
BoutputJ=+