
BoutputJ¬=