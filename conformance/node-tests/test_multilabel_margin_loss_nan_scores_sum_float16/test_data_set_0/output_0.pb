
BoutputJfA