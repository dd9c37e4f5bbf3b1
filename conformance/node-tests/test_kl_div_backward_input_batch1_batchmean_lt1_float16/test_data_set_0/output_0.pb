
BoutputJ
Êº<º½ï¿ø½