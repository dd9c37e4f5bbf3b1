
BoutputJC?