
BoutputJŠ¶