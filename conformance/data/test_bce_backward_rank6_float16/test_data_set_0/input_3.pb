
BweightJ{>»?‡;