
BoutputJaN)o