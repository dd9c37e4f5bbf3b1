
BoutputJN