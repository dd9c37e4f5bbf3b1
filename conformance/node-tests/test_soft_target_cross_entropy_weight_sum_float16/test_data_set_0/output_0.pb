
BoutputJCG