
BoutputJ6D