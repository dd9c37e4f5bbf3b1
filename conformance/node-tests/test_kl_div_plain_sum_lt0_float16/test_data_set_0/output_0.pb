
BoutputJşC