
BoutputJ$<