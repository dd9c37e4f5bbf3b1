
BoutputJÚ9