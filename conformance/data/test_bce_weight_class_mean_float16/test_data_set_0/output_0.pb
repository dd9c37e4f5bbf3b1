
BoutputJ9