
BoutputJ9