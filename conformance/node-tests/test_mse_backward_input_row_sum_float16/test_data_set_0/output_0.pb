
BoutputJ
w¿?©Eú6ËJ