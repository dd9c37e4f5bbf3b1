
BoutputJü@