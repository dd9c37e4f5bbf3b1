
BoutputJ?I