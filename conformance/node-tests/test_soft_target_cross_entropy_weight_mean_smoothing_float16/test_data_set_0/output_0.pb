
BoutputJŽ@