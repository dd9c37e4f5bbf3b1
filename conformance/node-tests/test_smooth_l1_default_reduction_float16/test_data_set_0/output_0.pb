
BoutputJù: