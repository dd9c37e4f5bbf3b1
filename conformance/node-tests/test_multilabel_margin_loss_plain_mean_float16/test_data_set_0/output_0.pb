
BoutputJ¨8