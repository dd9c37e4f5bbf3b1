
BoutputJæ6