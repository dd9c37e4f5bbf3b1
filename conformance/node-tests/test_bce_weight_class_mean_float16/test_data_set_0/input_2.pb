
BweightJ
7𫗕9V/