
BoutputJo8