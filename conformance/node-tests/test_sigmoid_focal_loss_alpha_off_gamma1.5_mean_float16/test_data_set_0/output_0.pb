
BoutputJº: