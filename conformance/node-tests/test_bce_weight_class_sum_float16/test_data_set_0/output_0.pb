
BoutputJ G