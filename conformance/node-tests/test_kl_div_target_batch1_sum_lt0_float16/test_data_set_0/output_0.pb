
BoutputJ1A