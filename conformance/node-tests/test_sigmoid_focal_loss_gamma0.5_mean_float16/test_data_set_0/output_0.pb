
BoutputJo7