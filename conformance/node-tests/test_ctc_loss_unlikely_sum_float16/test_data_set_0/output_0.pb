
BoutputJT{