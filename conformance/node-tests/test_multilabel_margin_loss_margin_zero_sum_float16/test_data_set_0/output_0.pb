
BoutputJš9