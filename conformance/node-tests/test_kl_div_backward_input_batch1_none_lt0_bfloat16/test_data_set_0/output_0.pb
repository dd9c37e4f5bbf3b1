BoutputJ
e¾Y½R¾_?Š½