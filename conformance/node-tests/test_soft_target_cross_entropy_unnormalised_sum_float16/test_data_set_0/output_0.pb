
BoutputJlU