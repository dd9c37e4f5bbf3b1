
BoutputJÑ<