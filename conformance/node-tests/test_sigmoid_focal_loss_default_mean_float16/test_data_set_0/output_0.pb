
BoutputJ€4