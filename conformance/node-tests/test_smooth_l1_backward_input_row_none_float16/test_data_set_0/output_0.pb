
BoutputJ
â:ñ65ÁºŒº