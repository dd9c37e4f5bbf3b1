
BoutputJ<: