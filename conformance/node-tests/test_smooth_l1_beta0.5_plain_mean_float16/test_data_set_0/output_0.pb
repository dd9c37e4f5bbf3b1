
BoutputJ2<