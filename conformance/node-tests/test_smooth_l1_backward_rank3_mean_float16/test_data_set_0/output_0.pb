
BoutputJ*&¿©–(