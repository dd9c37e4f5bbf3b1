
BoutputJ×;