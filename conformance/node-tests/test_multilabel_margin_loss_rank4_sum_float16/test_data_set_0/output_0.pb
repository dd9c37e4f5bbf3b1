
BoutputJúG