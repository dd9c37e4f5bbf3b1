
BoutputJn8