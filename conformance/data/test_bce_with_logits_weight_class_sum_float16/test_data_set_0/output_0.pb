
BoutputJF