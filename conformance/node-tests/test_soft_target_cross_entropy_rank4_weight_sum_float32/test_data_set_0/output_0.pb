BoutputJ]
B