
BoutputJJI