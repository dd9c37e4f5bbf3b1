
BinputJ
¸9(< <E?