
BoutputJ!?