
BoutputJk@