
BoutputJ>N