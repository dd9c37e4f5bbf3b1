
BweightJ
Ã8*4;4ù4A.