
BoutputJT