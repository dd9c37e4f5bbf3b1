
BweightJ:2C4J8