
BoutputJZ>