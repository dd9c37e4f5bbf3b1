BoutputJ
B