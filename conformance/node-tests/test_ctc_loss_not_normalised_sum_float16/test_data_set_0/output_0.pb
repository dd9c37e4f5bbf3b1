
BoutputJ>Ñ