
BoutputJ!C