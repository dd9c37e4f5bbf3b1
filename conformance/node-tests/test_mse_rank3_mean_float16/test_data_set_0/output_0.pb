
BoutputJj?