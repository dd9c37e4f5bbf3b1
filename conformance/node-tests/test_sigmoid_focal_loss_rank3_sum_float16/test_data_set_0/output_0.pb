
BoutputJ[;