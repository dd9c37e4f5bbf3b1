
BoutputJ×<