BoutputJ
ª½œ½	¾G¾¾