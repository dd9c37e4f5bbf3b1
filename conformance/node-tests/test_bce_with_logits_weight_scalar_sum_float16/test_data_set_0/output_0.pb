
BoutputJgK