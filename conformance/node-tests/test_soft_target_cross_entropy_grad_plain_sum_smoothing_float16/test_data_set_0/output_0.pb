
BoutputJ(\ªŸX&B)Â µ¨é&9&Ì¤QIu(† ¦pž\Wp(ž8¨