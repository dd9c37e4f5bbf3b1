
BoutputJ<?