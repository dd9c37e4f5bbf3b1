
BoutputJäP