
BoutputJUc