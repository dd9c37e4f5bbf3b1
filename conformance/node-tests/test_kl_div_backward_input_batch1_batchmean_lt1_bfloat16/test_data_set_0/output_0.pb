BoutputJ
Y¿G¿¯¿þ¿¾¿