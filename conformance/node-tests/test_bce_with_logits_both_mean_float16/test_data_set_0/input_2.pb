
BweightJÃ;9ç9,8