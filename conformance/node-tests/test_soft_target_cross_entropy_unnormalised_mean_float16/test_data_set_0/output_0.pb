
BoutputJhL