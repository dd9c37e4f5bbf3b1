
BoutputJ6