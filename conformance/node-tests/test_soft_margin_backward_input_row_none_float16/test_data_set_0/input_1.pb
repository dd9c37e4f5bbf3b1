
BinputJ
Á¹Ñ@–A9 :