
BoutputJ-.-ª-6