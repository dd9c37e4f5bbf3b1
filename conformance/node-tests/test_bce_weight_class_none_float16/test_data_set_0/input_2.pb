
BweightJ
³:5:o5Á0P7