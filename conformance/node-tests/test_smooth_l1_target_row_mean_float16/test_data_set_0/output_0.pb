
BoutputJç8