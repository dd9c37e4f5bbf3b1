
BoutputJÀF