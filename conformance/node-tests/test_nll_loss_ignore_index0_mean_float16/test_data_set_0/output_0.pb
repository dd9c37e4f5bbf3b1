
BoutputJş?