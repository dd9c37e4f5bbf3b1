
BoutputJ9<