
BoutputJqR