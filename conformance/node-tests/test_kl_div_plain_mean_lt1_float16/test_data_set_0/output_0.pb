
BoutputJd2