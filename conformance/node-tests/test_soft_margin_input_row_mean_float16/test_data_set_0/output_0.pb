
BoutputJ]: