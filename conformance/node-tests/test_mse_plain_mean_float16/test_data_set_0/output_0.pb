
BoutputJÓ?