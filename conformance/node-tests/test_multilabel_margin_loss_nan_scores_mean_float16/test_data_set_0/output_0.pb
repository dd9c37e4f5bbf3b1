
BoutputJf=