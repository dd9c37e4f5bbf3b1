
BoutputJ¤D