
BoutputJ?,?,^.