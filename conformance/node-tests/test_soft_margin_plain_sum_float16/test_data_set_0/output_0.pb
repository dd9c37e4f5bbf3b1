
BoutputJæL