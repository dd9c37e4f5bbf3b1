
BoutputJ347¼¢7