
BoutputJñF