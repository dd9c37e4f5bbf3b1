
BoutputJ/