
BoutputJÿB