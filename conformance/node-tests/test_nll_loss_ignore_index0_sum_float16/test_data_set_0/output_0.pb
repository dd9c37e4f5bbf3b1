
BoutputJMD