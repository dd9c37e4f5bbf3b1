
BoutputJ19