
BoutputJ
”Àt¸A*>§Å