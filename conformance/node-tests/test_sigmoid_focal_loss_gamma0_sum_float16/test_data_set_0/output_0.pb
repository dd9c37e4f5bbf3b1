
BoutputJaI