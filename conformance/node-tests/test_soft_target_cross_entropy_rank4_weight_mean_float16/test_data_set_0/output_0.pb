
BoutputJQ@