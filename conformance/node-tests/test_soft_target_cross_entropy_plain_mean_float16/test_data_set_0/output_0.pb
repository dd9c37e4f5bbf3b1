
BoutputJJ@