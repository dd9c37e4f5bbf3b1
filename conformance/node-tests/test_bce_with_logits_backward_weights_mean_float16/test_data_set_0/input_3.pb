
BweightJf,á6(8œ;