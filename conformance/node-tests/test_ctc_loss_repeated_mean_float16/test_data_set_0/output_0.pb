
BoutputJ+C