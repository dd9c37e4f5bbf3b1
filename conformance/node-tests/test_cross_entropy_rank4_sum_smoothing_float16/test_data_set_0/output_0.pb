
BoutputJ/P