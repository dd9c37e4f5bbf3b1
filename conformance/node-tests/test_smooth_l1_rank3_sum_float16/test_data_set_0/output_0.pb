
BoutputJM