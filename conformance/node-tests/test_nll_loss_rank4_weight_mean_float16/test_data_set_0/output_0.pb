
BoutputJ(@