
BoutputJ¦H