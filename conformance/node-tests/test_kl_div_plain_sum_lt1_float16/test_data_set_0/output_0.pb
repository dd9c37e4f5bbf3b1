
BoutputJØB