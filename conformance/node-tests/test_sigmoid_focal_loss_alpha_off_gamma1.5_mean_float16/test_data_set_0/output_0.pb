
BoutputJÇ9