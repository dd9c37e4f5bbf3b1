
BweightJ
©=2<Ï4ñ9i<