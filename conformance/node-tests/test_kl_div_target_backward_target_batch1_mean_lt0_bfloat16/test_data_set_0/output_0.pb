BoutputJ
8¿%¿â>à½ì¾