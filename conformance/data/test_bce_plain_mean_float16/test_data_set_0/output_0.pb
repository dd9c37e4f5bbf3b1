
BoutputJå;