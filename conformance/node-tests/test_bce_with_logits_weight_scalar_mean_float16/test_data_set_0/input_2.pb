
BweightJš9