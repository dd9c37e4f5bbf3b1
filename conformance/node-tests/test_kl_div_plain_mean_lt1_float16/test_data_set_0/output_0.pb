
BoutputJz1