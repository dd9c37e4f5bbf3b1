
BinputJ
ë¶…¼d9n¼@