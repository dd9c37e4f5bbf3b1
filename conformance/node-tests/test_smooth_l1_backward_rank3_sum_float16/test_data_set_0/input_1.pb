
BinputJเภฝิน