
BoutputJ:/F^