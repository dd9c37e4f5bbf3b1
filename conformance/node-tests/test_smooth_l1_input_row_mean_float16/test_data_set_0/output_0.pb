
BoutputJG: