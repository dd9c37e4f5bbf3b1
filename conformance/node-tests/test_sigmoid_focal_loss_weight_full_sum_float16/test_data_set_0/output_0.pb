
BoutputJÒE