
BweightJ
u3#:æ;w:¾: