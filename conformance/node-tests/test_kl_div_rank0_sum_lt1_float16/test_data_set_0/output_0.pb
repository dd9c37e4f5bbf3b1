
BoutputJ@