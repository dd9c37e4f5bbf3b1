
BweightJ½1]0?/Ö;