
BinputJ
f√ﬁ¿üºüπ¡