
BoutputJKI