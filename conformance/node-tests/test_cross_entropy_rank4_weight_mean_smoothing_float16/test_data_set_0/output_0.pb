
BoutputJ-@