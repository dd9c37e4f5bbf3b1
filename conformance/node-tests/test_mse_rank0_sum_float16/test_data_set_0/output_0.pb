
BoutputJ B