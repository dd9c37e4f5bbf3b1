
BoutputJ^9