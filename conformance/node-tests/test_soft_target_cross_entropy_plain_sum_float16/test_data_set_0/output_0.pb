
BoutputJJH