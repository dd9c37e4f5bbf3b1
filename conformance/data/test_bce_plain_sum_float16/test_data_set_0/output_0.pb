
BoutputJïL