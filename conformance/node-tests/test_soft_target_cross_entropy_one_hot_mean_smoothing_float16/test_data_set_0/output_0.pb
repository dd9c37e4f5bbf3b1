
BoutputJ™E