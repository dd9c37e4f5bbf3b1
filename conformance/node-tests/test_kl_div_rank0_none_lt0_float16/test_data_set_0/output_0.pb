
BoutputJq”