
BoutputJ
²««;®€°Ä®