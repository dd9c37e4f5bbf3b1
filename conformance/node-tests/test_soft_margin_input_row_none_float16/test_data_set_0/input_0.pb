
BinputJ
ì¹ô?§:ò¼a=