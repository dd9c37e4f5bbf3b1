
BoutputJ77