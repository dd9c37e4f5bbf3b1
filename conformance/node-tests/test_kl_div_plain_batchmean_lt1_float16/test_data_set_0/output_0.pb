
BoutputJı;