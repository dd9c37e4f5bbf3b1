
BoutputJˆI