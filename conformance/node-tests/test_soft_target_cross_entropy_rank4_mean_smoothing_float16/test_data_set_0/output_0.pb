
BoutputJ8@