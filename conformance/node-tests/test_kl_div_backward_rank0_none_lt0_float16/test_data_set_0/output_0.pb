
BoutputJ4³