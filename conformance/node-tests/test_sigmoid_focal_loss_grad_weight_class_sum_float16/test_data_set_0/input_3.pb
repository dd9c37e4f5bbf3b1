
BweightJU.0##9‹:Z9v: