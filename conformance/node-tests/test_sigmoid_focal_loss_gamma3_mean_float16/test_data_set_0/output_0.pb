
BoutputJ+3