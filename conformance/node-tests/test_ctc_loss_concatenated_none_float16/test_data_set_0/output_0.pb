
BoutputJ‚L'PG4F