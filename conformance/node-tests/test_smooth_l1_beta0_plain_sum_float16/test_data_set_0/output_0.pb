
BoutputJZN