
BweightJ–6b;f,á6(8œ;