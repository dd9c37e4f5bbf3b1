
BoutputJ5B