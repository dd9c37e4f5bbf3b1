
BoutputJƒI