
BoutputJ>z@