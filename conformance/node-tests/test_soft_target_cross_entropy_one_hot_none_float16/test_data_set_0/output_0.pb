
BoutputJ[L@’DŠ;