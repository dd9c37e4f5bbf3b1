
BoutputJK