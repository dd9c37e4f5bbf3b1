
BoutputJ`E