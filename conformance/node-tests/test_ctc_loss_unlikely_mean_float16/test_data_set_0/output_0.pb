
BoutputJTs