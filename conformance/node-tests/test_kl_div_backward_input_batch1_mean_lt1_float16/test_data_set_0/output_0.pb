
BoutputJ
0ª¯©­;¯p­