
BinputJ
¾5>%¿¿>ª