
BoutputJ KD@E:•Af;’=´=PApAï?3@R?8;o@s=ƒD