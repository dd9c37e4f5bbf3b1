
BoutputJ¡<