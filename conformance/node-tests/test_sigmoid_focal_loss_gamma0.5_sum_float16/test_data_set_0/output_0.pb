
BoutputJ“I