
BoutputJú9