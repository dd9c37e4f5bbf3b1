
BoutputJ[@