
BoutputJÀ?