
BoutputJş;