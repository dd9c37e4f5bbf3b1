
BoutputJg>