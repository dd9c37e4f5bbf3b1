
BoutputJ©=