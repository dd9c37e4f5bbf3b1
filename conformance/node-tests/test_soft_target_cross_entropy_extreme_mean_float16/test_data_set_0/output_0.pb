
BoutputJ0k