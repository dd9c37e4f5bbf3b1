
BoutputJüH