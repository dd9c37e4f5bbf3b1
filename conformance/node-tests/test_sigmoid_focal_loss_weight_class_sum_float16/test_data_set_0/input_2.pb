
BweightJ„84ÿ;¤/;9