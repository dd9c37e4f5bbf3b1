
BoutputJèK