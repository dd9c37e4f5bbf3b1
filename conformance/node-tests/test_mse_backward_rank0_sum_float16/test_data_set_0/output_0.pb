
BoutputJ@A