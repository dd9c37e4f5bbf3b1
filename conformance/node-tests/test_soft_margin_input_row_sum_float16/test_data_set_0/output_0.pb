
BoutputJôK