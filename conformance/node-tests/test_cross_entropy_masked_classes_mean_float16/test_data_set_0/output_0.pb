
BoutputJC