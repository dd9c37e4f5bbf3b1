
BoutputJ­>Ý?õ>Œ?