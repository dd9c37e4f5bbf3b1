
BoutputJ/;