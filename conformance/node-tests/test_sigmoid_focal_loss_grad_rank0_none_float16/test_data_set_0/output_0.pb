
BoutputJ³