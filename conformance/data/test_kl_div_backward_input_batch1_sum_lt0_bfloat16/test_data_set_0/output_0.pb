BoutputJ
£¾–¾¿?¿¿