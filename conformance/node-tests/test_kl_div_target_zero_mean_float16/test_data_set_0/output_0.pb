
BoutputJÁ8