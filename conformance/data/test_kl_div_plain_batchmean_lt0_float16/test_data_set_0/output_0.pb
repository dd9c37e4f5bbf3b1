
BoutputJØ: