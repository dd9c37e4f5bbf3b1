
BweightJ_56:S69