
BoutputJ>F