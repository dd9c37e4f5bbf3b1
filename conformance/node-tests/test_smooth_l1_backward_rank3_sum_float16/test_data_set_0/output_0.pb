
BoutputJíGæ@E