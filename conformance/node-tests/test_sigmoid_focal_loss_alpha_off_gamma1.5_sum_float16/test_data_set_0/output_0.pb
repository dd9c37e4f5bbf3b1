
BoutputJUL