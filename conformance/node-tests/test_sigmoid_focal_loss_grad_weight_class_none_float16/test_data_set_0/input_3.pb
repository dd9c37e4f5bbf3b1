
BweightJÚ5Ç4í:‰8d5ß8