
BoutputJW<