
BoutputJ3?3;