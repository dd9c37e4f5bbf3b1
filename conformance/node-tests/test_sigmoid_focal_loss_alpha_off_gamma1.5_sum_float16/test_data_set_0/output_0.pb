
BoutputJM