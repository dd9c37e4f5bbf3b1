
BoutputJ­K