
BoutputJDO