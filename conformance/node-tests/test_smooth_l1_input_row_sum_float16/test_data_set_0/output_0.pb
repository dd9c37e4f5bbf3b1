
BoutputJÙK