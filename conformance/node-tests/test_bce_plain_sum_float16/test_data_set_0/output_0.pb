
BoutputJJM