
BoutputJ¶E