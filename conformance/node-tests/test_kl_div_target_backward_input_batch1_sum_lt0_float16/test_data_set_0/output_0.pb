
BoutputJ(DãC¿µ¿ı<§@A^AW;´<é@CòBw!º$ê@7D$?Ä4å=