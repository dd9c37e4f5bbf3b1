
BoutputJ#@