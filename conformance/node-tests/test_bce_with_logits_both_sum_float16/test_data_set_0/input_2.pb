
BweightJ{91,6%