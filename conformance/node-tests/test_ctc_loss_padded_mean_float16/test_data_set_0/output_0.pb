
BoutputJ©I