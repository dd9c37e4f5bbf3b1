
BoutputJ­L