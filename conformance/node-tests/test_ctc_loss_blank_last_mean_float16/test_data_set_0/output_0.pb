
BoutputJ~H