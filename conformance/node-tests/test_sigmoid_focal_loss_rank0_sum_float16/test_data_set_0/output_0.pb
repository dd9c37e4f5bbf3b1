
BoutputJâ/