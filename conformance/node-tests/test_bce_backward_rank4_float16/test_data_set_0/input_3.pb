
BweightJ>8?º: