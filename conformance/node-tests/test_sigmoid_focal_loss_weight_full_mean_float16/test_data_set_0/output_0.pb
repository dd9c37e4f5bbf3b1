
BoutputJ«3