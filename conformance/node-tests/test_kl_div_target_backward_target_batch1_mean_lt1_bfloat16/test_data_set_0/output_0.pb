BoutputJ
¾½3;èº:½