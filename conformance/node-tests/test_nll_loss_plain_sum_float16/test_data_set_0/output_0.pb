
BoutputJ5F