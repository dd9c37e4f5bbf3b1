
BoutputJv@