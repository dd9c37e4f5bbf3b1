BinputJ
mÀÀ”¿4¿$À