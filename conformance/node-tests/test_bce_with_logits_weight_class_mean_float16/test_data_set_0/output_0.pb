
BoutputJğ6