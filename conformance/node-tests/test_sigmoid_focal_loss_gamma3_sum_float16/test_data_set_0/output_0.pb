
BoutputJŒH