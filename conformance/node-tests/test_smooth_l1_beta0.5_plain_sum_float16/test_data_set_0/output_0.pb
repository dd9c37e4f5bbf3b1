
BoutputJ?M