
BoutputJ…P