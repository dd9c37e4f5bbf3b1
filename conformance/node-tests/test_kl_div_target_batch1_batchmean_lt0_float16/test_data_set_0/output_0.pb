
BoutputJ_9