
BoutputJú7