
BoutputJ^A