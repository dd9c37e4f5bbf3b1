
BoutputJ€R