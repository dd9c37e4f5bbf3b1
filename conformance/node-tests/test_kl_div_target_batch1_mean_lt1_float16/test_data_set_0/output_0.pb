
BoutputJK0