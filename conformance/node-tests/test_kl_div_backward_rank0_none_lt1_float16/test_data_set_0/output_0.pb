
BoutputJ¼