BinputJ
·¿p¿Ê>¿?