
BweightJ
L5¦=ã<ý>–?