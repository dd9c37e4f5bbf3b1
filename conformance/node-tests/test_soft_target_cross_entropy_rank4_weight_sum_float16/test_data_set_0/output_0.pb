
BoutputJQP