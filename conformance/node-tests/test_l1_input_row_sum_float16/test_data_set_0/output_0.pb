
BoutputJmM