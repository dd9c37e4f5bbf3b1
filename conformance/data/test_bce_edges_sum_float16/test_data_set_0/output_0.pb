
BoutputJFZ