
BinputJ
h<j5R¸
½”¿