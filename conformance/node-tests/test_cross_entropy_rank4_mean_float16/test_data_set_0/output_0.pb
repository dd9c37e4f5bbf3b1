
BoutputJ˜@