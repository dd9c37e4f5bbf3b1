
BoutputJ
a4479³7