
BoutputJÏACCÏ½