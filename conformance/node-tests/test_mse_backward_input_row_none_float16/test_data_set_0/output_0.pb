
BoutputJ
8ÏEW@J<WÈ