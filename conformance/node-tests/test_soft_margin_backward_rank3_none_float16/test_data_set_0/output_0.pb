
BoutputJ;§À×B