
BoutputJ*@