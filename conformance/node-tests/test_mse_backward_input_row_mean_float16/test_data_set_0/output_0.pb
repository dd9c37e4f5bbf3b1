
BoutputJ
*0ë¯P¶È§“»