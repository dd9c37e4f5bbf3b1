
BoutputJÉI