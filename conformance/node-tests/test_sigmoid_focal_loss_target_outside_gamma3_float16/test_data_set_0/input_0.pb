
BinputJ{5¼µ<Á–¹…­a: