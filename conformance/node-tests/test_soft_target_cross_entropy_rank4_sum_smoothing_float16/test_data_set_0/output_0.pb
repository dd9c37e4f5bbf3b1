
BoutputJ8P