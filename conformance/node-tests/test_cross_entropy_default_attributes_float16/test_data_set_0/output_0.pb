
BoutputJC