
BoutputJNP