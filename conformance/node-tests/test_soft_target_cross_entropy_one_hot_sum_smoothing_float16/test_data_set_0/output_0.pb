
BoutputJ™M