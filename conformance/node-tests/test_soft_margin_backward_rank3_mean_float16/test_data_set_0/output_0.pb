
BoutputJVíx#