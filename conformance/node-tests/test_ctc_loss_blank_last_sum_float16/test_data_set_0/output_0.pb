
BoutputJ@S