
BoutputJ£O