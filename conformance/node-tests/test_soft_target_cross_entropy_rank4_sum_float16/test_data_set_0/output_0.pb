
BoutputJ>P