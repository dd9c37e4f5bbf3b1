
BoutputJkB¸hÃ