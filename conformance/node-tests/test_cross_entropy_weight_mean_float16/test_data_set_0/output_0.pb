
BoutputJXD