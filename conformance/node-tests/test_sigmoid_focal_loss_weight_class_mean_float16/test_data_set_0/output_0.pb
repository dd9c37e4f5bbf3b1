
BoutputJó0