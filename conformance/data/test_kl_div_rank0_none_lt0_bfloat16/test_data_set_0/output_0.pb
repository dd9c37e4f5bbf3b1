BoutputJ
: