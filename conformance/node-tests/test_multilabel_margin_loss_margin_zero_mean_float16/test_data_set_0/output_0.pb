
BoutputJš5