
BoutputJR