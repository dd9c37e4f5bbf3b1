
BoutputJL0