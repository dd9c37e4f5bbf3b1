
BoutputJŽH