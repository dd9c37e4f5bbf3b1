
BoutputJ—=