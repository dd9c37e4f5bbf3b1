
BoutputJıC