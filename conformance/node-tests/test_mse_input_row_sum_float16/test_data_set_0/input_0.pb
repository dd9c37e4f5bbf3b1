
BinputJ
¹½~»N61¸48