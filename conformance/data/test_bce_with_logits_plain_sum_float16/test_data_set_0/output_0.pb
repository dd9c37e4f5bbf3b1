
BoutputJIM