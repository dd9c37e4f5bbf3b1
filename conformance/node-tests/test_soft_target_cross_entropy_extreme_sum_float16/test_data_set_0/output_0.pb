
BoutputJ0o