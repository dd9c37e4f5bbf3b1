
BoutputJ–O