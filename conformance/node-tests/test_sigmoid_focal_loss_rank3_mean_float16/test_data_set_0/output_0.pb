
BoutputJò+