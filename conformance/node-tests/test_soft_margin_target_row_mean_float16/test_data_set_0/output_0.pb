
BoutputJT: