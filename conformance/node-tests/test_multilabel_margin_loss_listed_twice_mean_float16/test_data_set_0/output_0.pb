
BoutputJ{?