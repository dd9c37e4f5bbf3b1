
BoutputJ¨F