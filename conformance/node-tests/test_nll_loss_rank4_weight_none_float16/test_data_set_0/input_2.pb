
BweightJ©=2<Ï4