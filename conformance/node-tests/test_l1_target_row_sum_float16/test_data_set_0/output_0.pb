
BoutputJéL