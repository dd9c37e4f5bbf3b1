
BoutputJ;<