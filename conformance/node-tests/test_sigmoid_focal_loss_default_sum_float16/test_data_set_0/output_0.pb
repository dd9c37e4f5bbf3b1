
BoutputJ-I