
BoutputJ{C