
BoutputJnZyV$Y