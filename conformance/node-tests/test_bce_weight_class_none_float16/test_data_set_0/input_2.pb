
BweightJ
O#9X:8Ï9