
BoutputJQ