
BoutputJO