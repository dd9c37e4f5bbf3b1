
BoutputJ¨@