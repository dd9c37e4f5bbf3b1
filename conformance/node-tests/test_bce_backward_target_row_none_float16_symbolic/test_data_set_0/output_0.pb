
BoutputJ(ı§Aø/&½@y´dËe¾èAk<b¾Ø³B=0«=»Q²[µ}¹