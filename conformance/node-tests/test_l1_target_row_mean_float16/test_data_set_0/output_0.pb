
BoutputJÜ;