
BoutputJE8