
BoutputJB