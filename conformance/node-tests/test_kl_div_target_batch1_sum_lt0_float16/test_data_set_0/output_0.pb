
BoutputJ_A