
BweightJ
A;^9ê2 4s7