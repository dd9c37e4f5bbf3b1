
BoutputJ6J