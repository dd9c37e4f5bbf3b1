
BoutputJmG