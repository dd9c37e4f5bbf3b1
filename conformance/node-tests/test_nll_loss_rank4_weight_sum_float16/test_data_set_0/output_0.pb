
BoutputJÓM