
BweightJn:<5Ç9ð:%;+1