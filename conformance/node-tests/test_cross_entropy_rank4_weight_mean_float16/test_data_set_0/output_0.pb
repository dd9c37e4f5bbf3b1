
BoutputJ&@