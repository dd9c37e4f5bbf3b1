
BoutputJBO