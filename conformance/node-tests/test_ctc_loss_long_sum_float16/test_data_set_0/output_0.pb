
BoutputJ›^