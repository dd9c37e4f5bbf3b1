
BoutputJ©K