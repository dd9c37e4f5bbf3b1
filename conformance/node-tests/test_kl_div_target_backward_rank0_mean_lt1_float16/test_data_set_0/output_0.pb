
BoutputJA