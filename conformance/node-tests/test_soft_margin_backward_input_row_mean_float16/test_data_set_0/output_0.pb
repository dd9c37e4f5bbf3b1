
BoutputJ
'¤|¨¢°g­Ê!