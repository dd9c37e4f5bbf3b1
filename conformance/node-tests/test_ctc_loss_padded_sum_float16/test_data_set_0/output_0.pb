
BoutputJ^T