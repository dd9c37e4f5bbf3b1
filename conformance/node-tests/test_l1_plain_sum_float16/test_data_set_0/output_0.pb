
BoutputJN